#ifndef CGOTCHUDBUS_SHIM_H
#define CGOTCHUDBUS_SHIM_H
#include <dbus/dbus.h>
#include <sys/eventfd.h>

// Handler results and dispatch statuses are C enums; plain ints keep the Swift side free of enum import quirks.
static inline int CGotchuDBus_handlerResult(int handled) {
    return handled ? DBUS_HANDLER_RESULT_HANDLED : DBUS_HANDLER_RESULT_NOT_YET_HANDLED;
}

static inline int CGotchuDBus_dispatchDataRemains(DBusConnection *connection) {
    return dbus_connection_dispatch(connection) == DBUS_DISPATCH_DATA_REMAINS;
}

#endif
