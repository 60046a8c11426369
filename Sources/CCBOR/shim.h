#ifndef AUTHD_CCBOR_SHIM_H
#define AUTHD_CCBOR_SHIM_H
#include <cbor.h>
#include <stdlib.h>
#endif
