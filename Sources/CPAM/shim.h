#ifndef AUTHD_CPAM_SHIM_H
#define AUTHD_CPAM_SHIM_H
#include <security/pam_modules.h>
#include <security/pam_ext.h>
#include <security/_pam_types.h>
#include <stddef.h>
#include <syslog.h>

/* pam_prompt and pam_syslog take printf formats (varargs, which Swift cannot call): these pass
   the text as one %s argument, so a message can never be read as a format. */
static inline int authd_pam_prompt(pam_handle_t *pamh, int style, char **response, const char *text) {
    return pam_prompt(pamh, style, response, "%s", text);
}
static inline void authd_pam_syslog(pam_handle_t *pamh, int priority, const char *text) {
    pam_syslog(pamh, priority, "%s", text);
}
/* pam_get_item hands out a const void * through a pointer; the string items (PAM_SERVICE,
   PAM_TTY, PAM_RHOST) as what they are, or NULL. */
static inline const char *authd_pam_string_item(const pam_handle_t *pamh, int type) {
    const void *item = NULL;
    return pam_get_item(pamh, type, &item) == PAM_SUCCESS ? (const char *)item : NULL;
}
#endif
