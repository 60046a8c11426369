#ifndef AUTHD_CEAC_SHIM_H
#define AUTHD_CEAC_SHIM_H
#include <string.h>
/* libeac's API is written in OpenSSL's BUF_MEM and reports failures on OpenSSL's error queue:
 * both belong to the PACE wrapper's view of libeac. */
#include <openssl/buffer.h>
#include <openssl/err.h>
#include <openssl/objects.h>
#include <eac/eac.h>
#include <eac/pace.h>
#include <eac/objects.h>

/* The OID of the PACE protocol EF.CardAccess selected, DER content bytes (no tag/length). */
static inline int authd_eac_pace_oid(const EAC_CTX *ctx, unsigned char *out, int capacity) {
    if (!ctx || !ctx->pace_ctx) return -1;
    const ASN1_OBJECT *object = OBJ_nid2obj(ctx->pace_ctx->protocol);
    if (!object) return -1;
    int length = OBJ_length(object);
    if (length <= 0 || length > capacity) return -1;
    memcpy(out, OBJ_get0_data(object), (size_t)length);
    return length;
}
static inline int authd_eac_pace_parameter_id(const EAC_CTX *ctx) {
    return (ctx && ctx->pace_ctx) ? ctx->pace_ctx->id : -1;
}
#endif
