#ifndef AUTHD_COPENSSL_SHIM_H
#define AUTHD_COPENSSL_SHIM_H
#include <openssl/crypto.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/pem.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/param_build.h>

/* OPENSSL_free is a macro over CRYPTO_free with file/line arguments. */
static inline void authd_openssl_free(void *p) { OPENSSL_free(p); }
/* EVP_EC_gen is a macro over the variadic EVP_PKEY_Q_keygen. */
static inline EVP_PKEY *authd_ec_generate(const char *curve) { return EVP_PKEY_Q_keygen(NULL, NULL, "EC", curve); }
/* EVP_PKEY_PUBLIC_KEY is a macro over OSSL_KEYMGMT_SELECT_* flags. */
static inline int authd_evp_pkey_public_key_selection(void) { return EVP_PKEY_PUBLIC_KEY; }
/* OSSL_PARAM_BLD keeps the key-name pointers it is given until OSSL_PARAM_BLD_to_param, so the
 * names must be static C strings, which Swift's temporary bridged strings are not. */
static inline int authd_param_push_rsa_public(OSSL_PARAM_BLD *builder, const BIGNUM *n, const BIGNUM *e) {
    return OSSL_PARAM_BLD_push_BN(builder, OSSL_PKEY_PARAM_RSA_N, n) == 1 && OSSL_PARAM_BLD_push_BN(builder, OSSL_PKEY_PARAM_RSA_E, e) == 1;
}
static inline int authd_param_push_p256_public(OSSL_PARAM_BLD *builder, const unsigned char *point, size_t length) {
    return OSSL_PARAM_BLD_push_utf8_string(builder, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) == 1
        && OSSL_PARAM_BLD_push_octet_string(builder, OSSL_PKEY_PARAM_PUB_KEY, point, length) == 1;
}
/* An EC private key from its scalar: the group, the scalar and the public point, as
 * EVP_PKEY_fromdata takes them (the names must be static, as above). */
static inline int authd_param_push_p256_private(OSSL_PARAM_BLD *builder, const BIGNUM *d, const unsigned char *point, size_t length) {
    return OSSL_PARAM_BLD_push_utf8_string(builder, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) == 1
        && OSSL_PARAM_BLD_push_BN(builder, OSSL_PKEY_PARAM_PRIV_KEY, d) == 1
        && OSSL_PARAM_BLD_push_octet_string(builder, OSSL_PKEY_PARAM_PUB_KEY, point, length) == 1;
}
/* EVP_PKEY_KEYPAIR is a macro over OSSL_KEYMGMT_SELECT_* flags. */
static inline int authd_evp_pkey_keypair_selection(void) { return EVP_PKEY_KEYPAIR; }
/* The parameters of the single-step KDF (NIST SP 800-56A's Concat KDF, as JOSE's ECDH-ES uses
 * it) with SHA-256: OSSL_PARAM keeps the name and digest pointers, which must be static; `key`
 * and `info` must outlive the EVP_KDF_derive call they are given to. `params` holds four. */
static inline void authd_sskdf_sha256_params(OSSL_PARAM *params, const unsigned char *key, size_t key_length,
                                             const unsigned char *info, size_t info_length) {
    params[0] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)"SHA256", 0);
    params[1] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)key, key_length);
    params[2] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info, info_length);
    params[3] = OSSL_PARAM_construct_end();
}
#endif
