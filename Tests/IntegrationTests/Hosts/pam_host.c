/* A PAM application for the AddressSanitizer test: compiled by the test with
 * -fsanitize=address, it runs one service's auth and account stacks for a user through libpam
 * (which dlopens pam_authd.so), answering every hidden question with the next of its
 * arguments, then dlopens and dlcloses the module itself, as a program that loads it twice would.
 *
 * usage: pam_host MODULE SERVICE USER [ANSWER...]
 * exit status: pam_authenticate's code, or 100 + pam_acct_mgmt's, or 99 on a usage error. */
#include <dlfcn.h>
#include <security/pam_appl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct answers {
    char **next;
    char **end;
};

static int converse(int count, const struct pam_message **messages, struct pam_response **responses, void *data) {
    struct answers *answers = data;
    struct pam_response *replies = calloc((size_t)count, sizeof *replies);
    if (replies == NULL) return PAM_BUF_ERR;
    for (int i = 0; i < count; i++) {
        switch (messages[i]->msg_style) {
        case PAM_PROMPT_ECHO_OFF:
        case PAM_PROMPT_ECHO_ON:
            printf("asked: %s\n", messages[i]->msg);
            if (answers->next == answers->end) {
                free(replies);
                return PAM_CONV_ERR;
            }
            replies[i].resp = strdup(*answers->next++);
            break;
        default:
            printf("told: %s\n", messages[i]->msg);
        }
    }
    *responses = replies;
    return PAM_SUCCESS;
}

int main(int argc, char **argv) {
    if (argc < 5) return 99;
    struct answers answers = {argv + 5, argv + argc};
    struct pam_conv conversation = {converse, &answers};
    pam_handle_t *handle = NULL;
    if (pam_start_confdir(argv[3], argv[4], &conversation, argv[2], &handle) != PAM_SUCCESS) return 99;
    int authenticated = pam_authenticate(handle, 0);
    int account = authenticated == PAM_SUCCESS ? pam_acct_mgmt(handle, 0) : PAM_SUCCESS;
    pam_end(handle, authenticated);
    printf("authenticate: %s\n", pam_strerror(NULL, authenticated));

    void *module = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (module == NULL || dlsym(module, "pam_sm_authenticate") == NULL) {
        printf("dlopen: %s\n", dlerror());
        return 98;
    }
    dlclose(module);
    return authenticated != PAM_SUCCESS ? authenticated : account != PAM_SUCCESS ? 100 + account : 0;
}
