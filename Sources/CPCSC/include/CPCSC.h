#ifndef AUTHD_CPCSC_SHIM_H
#define AUTHD_CPCSC_SHIM_H
#include <PCSC/winscard.h>
#include <PCSC/wintypes.h>

/* The protocol control blocks are addresses of globals behind macros. */
static inline const SCARD_IO_REQUEST *authd_pcsc_pci(DWORD protocol) {
    return protocol == SCARD_PROTOCOL_T0 ? SCARD_PCI_T0 : SCARD_PCI_T1;
}
/* Return codes are casts of hex literals; Swift sees them as plain numbers here. */
static inline LONG authd_pcsc_code(unsigned int code) { return (LONG)code; }
#endif
