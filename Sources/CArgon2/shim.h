#ifndef AUTHD_CARGON2_SHIM_H
#define AUTHD_CARGON2_SHIM_H
#include <argon2.h>
#endif
