#ifndef AUTHD_CPOSTGRESQL_SHIM_H
#define AUTHD_CPOSTGRESQL_SHIM_H
#include <libpq-fe.h>
#endif
