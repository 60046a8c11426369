#ifndef AUTHD_CPSL_SHIM_H
#define AUTHD_CPSL_SHIM_H
#include <libpsl.h>
#endif
