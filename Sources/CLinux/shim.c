#define _GNU_SOURCE
#include "CLinux.h"
#include <stddef.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/un.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <malloc.h>

int authd_accept4(int fd, int flags) {
    return accept4(fd, NULL, NULL, flags);
}

int authd_peer_credentials(int fd, int32_t *pid, uint32_t *uid, uint32_t *gid) {
    struct ucred credentials;
    socklen_t length = sizeof(credentials);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return -1;
    *pid = credentials.pid;
    *uid = credentials.uid;
    *gid = credentials.gid;
    return 0;
}

int authd_disable_dumping(void) {
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

int authd_set_rlimit_core_zero(void) {
    struct rlimit none = { 0, 0 };
    return setrlimit(RLIMIT_CORE, &none);
}

/* Raises the soft descriptor limit to the hard limit (capped at 2^20); returns the new soft limit. */
long authd_raise_nofile_limit(void) {
    struct rlimit files;
    if (getrlimit(RLIMIT_NOFILE, &files) != 0) return -1;
    if (files.rlim_cur < files.rlim_max) {
        rlim_t wanted = files.rlim_max < (1 << 20) ? files.rlim_max : (1 << 20);
        if (wanted > files.rlim_cur) {
            files.rlim_cur = wanted;
            if (setrlimit(RLIMIT_NOFILE, &files) != 0) return -1;
        }
    }
    return (long)files.rlim_cur;
}

int authd_connect_unix_socket(int fd, const char *path) {
    struct sockaddr_un address;
    memset(&address, 0, sizeof(address));
    address.sun_family = AF_UNIX;
    size_t length = strlen(path);
    if (length >= sizeof(address.sun_path)) { errno = ENAMETOOLONG; return -1; }
    memcpy(address.sun_path, path, length);
    int status;
    do { status = connect(fd, (struct sockaddr *)&address, sizeof(address)); } while (status != 0 && errno == EINTR);
    return status;
}

int authd_connect_unix(const char *path) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (authd_connect_unix_socket(fd, path) != 0) { int saved = errno; close(fd); errno = saved; return -1; }
    return fd;
}

int authd_pipe_cloexec(int fds[2]) {
    return pipe2(fds, O_CLOEXEC);
}

int authd_spawn_close_from(posix_spawn_file_actions_t *actions, int lowfd) {
    return posix_spawn_file_actions_addclosefrom_np(actions, lowfd);
}

int authd_malloc_map_from(size_t bytes) {
    return mallopt(M_MMAP_THRESHOLD, (int)bytes);
}

int authd_malloc_keep_free_top(size_t bytes) {
    return mallopt(M_TRIM_THRESHOLD, (int)bytes);
}

int authd_malloc_trim(void) {
    return malloc_trim(0);
}

size_t authd_malloc_in_use(void) {
    struct mallinfo2 info = mallinfo2();
    return info.uordblks + info.hblkhd;
}
