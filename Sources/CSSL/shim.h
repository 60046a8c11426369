#ifndef AUTHD_CSSL_SHIM_H
#define AUTHD_CSSL_SHIM_H
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>

/* Macros over SSL_CTX_ctrl / SSL_ctrl, which Swift cannot import. */
static inline int authd_ssl_ctx_tls13_only(SSL_CTX *ctx) {
    return SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) == 1 && SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION) == 1;
}
/* Partial writes, and a retried write may come from a buffer that moved (the outbox grows). */
static inline void authd_ssl_ctx_set_write_modes(SSL_CTX *ctx) {
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_RELEASE_BUFFERS);
}
/* The key exchange groups offered and accepted, most preferred first (a colon-separated list). */
static inline int authd_ssl_ctx_set_groups(SSL_CTX *ctx, const char *groups) { return SSL_CTX_set1_groups_list(ctx, groups) == 1; }
static inline int authd_ssl_set_server_name(SSL *ssl, const char *name) { return SSL_set_tlsext_host_name(ssl, name) == 1; }
#endif
