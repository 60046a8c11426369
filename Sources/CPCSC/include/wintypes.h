/* See pcsclite.h beside this file. */
#include <PCSC/wintypes.h>
