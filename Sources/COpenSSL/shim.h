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

/* OPENSSL_free is a macro over CRYPTO_free with file/line arguments. */
static inline void authd_openssl_free(void *p) { OPENSSL_free(p); }
#endif
