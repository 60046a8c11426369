#ifndef AUTHD_CSYSTEMD_SHIM_H
#define AUTHD_CSYSTEMD_SHIM_H
#include <systemd/sd-daemon.h>
/* sd_journal_sendv, not the varargs sd_journal_send, is what Swift calls. */
#define SD_JOURNAL_SUPPRESS_LOCATION 1
#include <systemd/sd-journal.h>
#endif
