#ifndef AUTHD_CLINUX_H
#define AUTHD_CLINUX_H
/* Linux-specific libc calls that Glibc's Swift overlay does not export without _GNU_SOURCE
 * (as swift-nio's CNIOLinux does). Thin wrappers only: no logic lives here. */
#include <sys/types.h>
#include <sys/socket.h>
#include <stdint.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

int authd_accept4(int fd, int flags);
int authd_peer_credentials(int fd, int32_t *pid, uint32_t *uid, uint32_t *gid);
int authd_disable_dumping(void);
int authd_set_rlimit_core_zero(void);
long authd_raise_nofile_limit(void);

/* Connects a blocking, close-on-exec AF_UNIX stream socket to `path`; -1 with errno on failure
 * (ENAMETOOLONG when the path does not fit sun_path). */
int authd_connect_unix(const char *path);

/* Connects the AF_UNIX stream socket `fd` to `path`, retrying after signals; 0, or -1 with errno.
 * A send timeout set on `fd` first (SO_SNDTIMEO) bounds the wait while the listener's queue is
 * full (it fails with EAGAIN then). */
int authd_connect_unix_socket(int fd, const char *path);

/* pipe2(O_CLOEXEC): both ends close-on-exec atomically, so a helper spawned concurrently by
 * another thread never inherits them. */
int authd_pipe_cloexec(int fds[2]);

/* posix_spawn_file_actions_addclosefrom_np: the child closes every descriptor from `lowfd` up,
 * so a long-lived helper never holds another thread's pipe open. */
int authd_spawn_close_from(posix_spawn_file_actions_t *actions, int lowfd);
/* mallopt(M_MMAP_THRESHOLD, bytes): a fixed threshold (glibc's own rises to the largest block
 * freed, up to 32 MiB), so every block of at least `bytes` is mapped and unmapped when freed.
 * 1 on success. */
int authd_malloc_map_from(size_t bytes);

/* mallopt(M_TRIM_THRESHOLD, bytes): an arena gives the free memory at its top back to the
 * system only once it reaches `bytes` (glibc's default stays at 128 KiB once the mapping
 * threshold is fixed). 1 on success. */
int authd_malloc_keep_free_top(size_t bytes);

/* malloc_trim(0): return the free memory of every arena to the system; 1 when some was. */
int authd_malloc_trim(void);

/* mallinfo2: the bytes malloc has handed out and not had back, in every arena and mapped. */
size_t authd_malloc_in_use(void);
#endif
