#ifndef AUTHD_CSYSTEMD_SHIM_H
#define AUTHD_CSYSTEMD_SHIM_H
#include <systemd/sd-daemon.h>
/* sd_journal_sendv, not the varargs sd_journal_send, is what Swift calls. */
#define SD_JOURNAL_SUPPRESS_LOCATION 1
#include <systemd/sd-journal.h>
/* sd-bus: Swift uses the non-varargs calls (message_new_method_call, append_basic, call,
   read_basic); the varargs ones (sd_bus_call_method, sd_bus_message_read) are unavailable. */
#include <systemd/sd-bus.h>
#endif
