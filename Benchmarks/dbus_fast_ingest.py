#!/usr/bin/env python3
"""PropertiesChanged ingest benchmark with dbus-fast, the counterpart of GotchuBlueZ's BlueZIngestBenchmark.

Two roles on one (private) bus:

  emit    (dbus-python) owns org.bluez, exports a minimal ObjectManager + Adapter1 at /org/bluez/hci0, and on
          every StartDiscovery floods --count Device1 PropertiesChanged signals (RSSI n plus ServiceData a{sv}
          holding an EID as ay) over --devices device paths.
  ingest  (dbus-fast) subscribes like a BlueZ scanner, calls SetDiscoveryFilter + StartDiscovery, decodes each
          signal into a sighting (EID from 10 lowercase hex bytes, RSSI 127 = unknown) and prints one JSON line.

The rate is sightings per CPU second of the consuming process (process time between the first and the last
signal), so it does not depend on how fast the emitter or the bus daemon are.

    pip install dbus-fast          # ingest; emit needs dbus-python and PyGObject (apt: python3-dbus python3-gi)
    python3 dbus_fast_ingest.py emit   --address unix:path=/tmp/bus --count 200000 &
    python3 dbus_fast_ingest.py ingest --address unix:path=/tmp/bus --count 200000
"""
import argparse
import asyncio
import json
import signal
import time

from dbus_fast import BusType, Message, MessageType, Variant
from dbus_fast.aio import MessageBus

FEED = "0000feed-0000-1000-8000-00805f9b34fb"
ADAPTER = "/org/bluez/hci0"
HEX = set(b"0123456789abcdef")


def emit(address, count, devices, rate=None):
    """The emitter uses dbus-python (libdbus), which keeps up with a flood and is independent of both consumers.

    With `rate`, it sends `rate` signals per second from SIGUSR1 on, until stopped, whatever anyone listens to
    (the kiosk load figure); advertisements registered meanwhile are accepted and counted on standard output.
    """
    import dbus
    import dbus.lowlevel
    import dbus.mainloop.glib
    import dbus.service
    from gi.repository import GLib

    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.bus.BusConnection(address)
    paths = [f"{ADAPTER}/dev_00_00_00_00_{i // 256:02X}_{i % 256:02X}" for i in range(devices)]

    sent = [0]

    def steady():
        # Ten batches a second keep the rate even without waking the loop for every signal.
        for _ in range(rate // 10):
            send(sent[0])
            sent[0] += 1
        bus.flush()
        return True

    def send(index):
        eid = f"{index % devices:010x}".encode()
        changed = dbus.Dictionary(
            {
                "RSSI": dbus.Int16(-40 - index % 50, variant_level=1),
                "ServiceData": dbus.Dictionary({FEED: dbus.ByteArray(eid)}, signature="sv", variant_level=1),
            },
            signature="sv",
        )
        message = dbus.lowlevel.SignalMessage(paths[index % devices], "org.freedesktop.DBus.Properties",
                                              "PropertiesChanged")
        message.append("org.bluez.Device1", changed, dbus.Array([], signature="s"), signature="sa{sv}as")
        bus.send_message(message)

    def flood():
        for index in range(count):
            send(index)
            if index % 1024 == 1023:
                bus.flush()
        bus.flush()
        return False

    class Root(dbus.service.Object):
        @dbus.service.method("org.freedesktop.DBus.ObjectManager", in_signature="", out_signature="a{oa{sa{sv}}}")
        def GetManagedObjects(self):
            return {ADAPTER: {"org.bluez.Adapter1": {"Powered": dbus.Boolean(True, variant_level=1),
                                                     "Address": dbus.String("00:00:00:00:00:01", variant_level=1)},
                              "org.bluez.LEAdvertisingManager1": {}}}

    class Adapter(dbus.service.Object):
        @dbus.service.method("org.bluez.Adapter1", in_signature="a{sv}", out_signature="")
        def SetDiscoveryFilter(self, _filter):
            pass

        @dbus.service.method("org.bluez.Adapter1", in_signature="", out_signature="")
        def StartDiscovery(self):
            GLib.timeout_add(50, flood)

        @dbus.service.method("org.bluez.Adapter1", in_signature="", out_signature="")
        def StopDiscovery(self):
            pass

        @dbus.service.method("org.bluez.LEAdvertisingManager1", in_signature="oa{sv}", out_signature="")
        def RegisterAdvertisement(self, path, _options):
            print(f"registered {path}", flush=True)

        @dbus.service.method("org.bluez.LEAdvertisingManager1", in_signature="o", out_signature="")
        def UnregisterAdvertisement(self, path):
            print(f"unregistered {path}", flush=True)

    name = dbus.service.BusName("org.bluez", bus)
    Root(bus, "/")
    Adapter(bus, ADAPTER)
    if rate:
        def start():
            GLib.timeout_add(100, steady)
            return False

        # The flood starts on SIGUSR1, so a consumer can be measured before and during it.
        GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGUSR1, start)
    print("ready", flush=True)
    _ = name
    GLib.MainLoop().run()


async def ingest(address, count, timeout):
    bus = await MessageBus(bus_address=address).connect()
    done = asyncio.get_running_loop().create_future()
    state = {"signals": 0, "sightings": 0, "malformed": 0, "first": None, "last": None}

    def handler(message):
        if message.message_type != MessageType.SIGNAL or message.member != "PropertiesChanged":
            return
        if not message.path.startswith(ADAPTER + "/") or message.body[0] != "org.bluez.Device1":
            return
        state["signals"] += 1
        if state["first"] is None:
            state["first"] = time.perf_counter()
            state["cpu_first"] = time.process_time()
        changed = message.body[1]
        rssi = changed.get("RSSI")
        rssi = rssi.value if rssi is not None and rssi.signature == "n" and rssi.value != 127 else None
        data = changed.get("ServiceData")
        if data is not None and data.signature == "a{sv}":
            entry = data.value.get(FEED)
            if entry is not None and entry.signature == "ay" and len(entry.value) == 10 and set(entry.value) <= HEX:
                state["sightings"] += 1
                _ = (entry.value.decode(), rssi)
            else:
                state["malformed"] += 1
        state["last"] = time.perf_counter()
        state["cpu_last"] = time.process_time()
        if state["signals"] >= count and not done.done():
            done.set_result(None)

    bus.add_message_handler(handler)
    await bus.call(Message(destination="org.freedesktop.DBus", path="/org/freedesktop/DBus",
                           interface="org.freedesktop.DBus", member="AddMatch", signature="s",
                           body=["type='signal',sender='org.bluez',interface='org.freedesktop.DBus.Properties',"
                                 "member='PropertiesChanged',path_namespace='/org/bluez'"]))
    await bus.call(Message(destination="org.bluez", path=ADAPTER, interface="org.bluez.Adapter1",
                           member="SetDiscoveryFilter", signature="a{sv}",
                           body=[{"Transport": Variant("s", "le"), "DuplicateData": Variant("b", True)}]))
    await bus.call(Message(destination="org.bluez", path=ADAPTER, interface="org.bluez.Adapter1",
                           member="StartDiscovery"))
    try:
        await asyncio.wait_for(done, timeout)
    except asyncio.TimeoutError:
        pass
    seconds = (state["last"] or 0) - (state["first"] or 0)
    cpu = state.get("cpu_last", 0) - state.get("cpu_first", 0)
    print(json.dumps({"implementation": "dbus-fast", "signals": state["signals"], "sightings": state["sightings"],
                      "malformed": state["malformed"], "seconds": round(seconds, 4), "cpu_seconds": round(cpu, 4),
                      "sightings_per_cpu_second": round(state["sightings"] / cpu) if cpu > 0 else None}))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("role", choices=["emit", "ingest"])
    parser.add_argument("--address", required=True, help="D-Bus address of the bus, e.g. unix:path=/tmp/bus")
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--devices", type=int, default=64)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--rate", type=int, help="emit: this many signals per second from SIGUSR1 on, until stopped")
    arguments = parser.parse_args()
    if arguments.role == "emit":
        emit(arguments.address, arguments.count, arguments.devices, arguments.rate)
    else:
        asyncio.run(ingest(arguments.address, arguments.count, arguments.timeout))


if __name__ == "__main__":
    main()
