/* A C target needs a source file; everything CPCSC offers is in include/CPCSC.h. */
#include "CPCSC.h"
