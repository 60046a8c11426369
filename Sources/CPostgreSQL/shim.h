#ifndef AUTHD_CPOSTGRESQL_SHIM_H
#define AUTHD_CPOSTGRESQL_SHIM_H
#include <dlfcn.h>
/* Through its directory, not pkg-config: libpq's flags would link it. */
#include <postgresql/libpq-fe.h>

/* authd opens libpq the first time it needs it (a store or a connection string on
 * PostgreSQL), rather than linking it: libpq brings Kerberos, LDAP, SASL and GnuTLS, about
 * 3 MB of pages every daemon on SQLite would map for nothing. Each entry of the table has
 * the type libpq-fe.h declares for its function; these are every function authd calls. */
#define AUTHD_LIBPQ_FUNCTIONS(X) \
    X(PQclear) X(PQcmdStatus) X(PQcmdTuples) X(PQconnectdbParams) X(PQconninfoFree) \
    X(PQconninfoParse) X(PQconsumeInput) X(PQerrorMessage) X(PQexec) X(PQexecPrepared) \
    X(PQfinish) X(PQfreemem) X(PQgetisnull) X(PQgetlength) X(PQgetvalue) X(PQnotifies) \
    X(PQntuples) X(PQprepare) X(PQresultErrorField) X(PQresultStatus) X(PQsetNoticeProcessor) \
    X(PQsocket) X(PQstatus)

typedef struct authd_libpq {
#define AUTHD_LIBPQ_FIELD(name) __typeof__(&name) name;
    AUTHD_LIBPQ_FUNCTIONS(AUTHD_LIBPQ_FIELD)
#undef AUTHD_LIBPQ_FIELD
} authd_libpq;

/* Opens `soname` for the rest of the process's life and fills `table`. Returns NULL, or
 * the dynamic linker's words for what failed (no such library, or a function it lacks). */
static inline const char *_Nullable authd_libpq_open(const char *_Nonnull soname, authd_libpq *_Nonnull table) {
    void *library = dlopen(soname, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (library == NULL) return dlerror();
#define AUTHD_LIBPQ_RESOLVE(name) \
    if ((*(void **)&table->name = dlsym(library, #name)) == NULL) return dlerror();
    AUTHD_LIBPQ_FUNCTIONS(AUTHD_LIBPQ_RESOLVE)
#undef AUTHD_LIBPQ_RESOLVE
    return NULL;
}

/* The library authd opens: libpq's soname on every Debian release since PostgreSQL 8.4. */
#define AUTHD_LIBPQ_SONAME "libpq.so.5"
#endif
