/* winscard.h and pcsclite.h include their siblings without the PCSC/ prefix: pcsclite's
 * pkg-config file answers with -I/usr/include/PCSC, and with -pthread, which SwiftPM refuses
 * (a warning on every build). These two forwarders resolve the siblings instead, so the
 * target needs no pkg-config flags; pthreads are in glibc itself. */
#include <PCSC/pcsclite.h>
