#ifndef CGOTCHUDBUS_SHIM_H
#define CGOTCHUDBUS_SHIM_H
#include <dbus/dbus.h>
#endif
