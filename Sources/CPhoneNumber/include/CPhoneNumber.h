#ifndef AUTHD_CPHONENUMBER_H
#define AUTHD_CPHONENUMBER_H
/* A tiny C surface over libphonenumber (C++), so Swift never sees C++ types.
 * Only what authd needs: parse, validate, normalize to E.164.
 *
 * The shim is a library of its own, libauthd-phonenumber.so, which authd opens at the first
 * phone number it reads (libphonenumber brings protobuf, ICU and abseil: about 4 MB of pages
 * a daemon that never sees a phone number need not map). Swift reaches the function through
 * AUTHD_PHONE_NORMALIZE_SYMBOL and the authd_phone_normalize_fn type below. */
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    AUTHD_PHONE_OK = 0,
    AUTHD_PHONE_NOT_A_NUMBER,
    AUTHD_PHONE_INVALID_COUNTRY_CODE,
    AUTHD_PHONE_TOO_SHORT,
    AUTHD_PHONE_TOO_LONG,
    AUTHD_PHONE_INVALID,          /* parses, but no number of that country has this form */
    AUTHD_PHONE_BAD_ARGUMENT      /* output buffers too small */
} authd_phone_status;

typedef enum {
    AUTHD_PHONE_TYPE_MOBILE = 0,
    AUTHD_PHONE_TYPE_FIXED_LINE_OR_MOBILE,
    AUTHD_PHONE_TYPE_FIXED_LINE,
    AUTHD_PHONE_TYPE_OTHER
} authd_phone_type;

/* Parses `input` (international "+…" form, or national form when `default_region` is an
 * ISO 3166-1 alpha-2 code; NULL or "" means international only), validates it against the
 * library's metadata, and on success writes the E.164 form and the number's region. */
authd_phone_status authd_phone_normalize(const char *input, const char *default_region,
                                         char *e164, size_t e164_size,
                                         char *region, size_t region_size,
                                         authd_phone_type *type);

typedef authd_phone_status (*authd_phone_normalize_fn)(const char *input, const char *default_region,
                                                       char *e164, size_t e164_size,
                                                       char *region, size_t region_size,
                                                       authd_phone_type *type);

#define AUTHD_PHONE_LIBRARY "libauthd-phonenumber.so"
#define AUTHD_PHONE_NORMALIZE_SYMBOL "authd_phone_normalize"

#ifdef __cplusplus
}
#endif
#endif
