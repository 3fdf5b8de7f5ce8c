// Types of other modules used as option values.
public import ArgumentParser
public import GotchuBlueZ
public import GotchuLedgerServer
public import GotchuLogging
public import GotchuSimulatedRadio
public import Logging

extension Logger.Level: @retroactive ExpressibleByArgument {}

extension BlueZAdvertisingType: ExpressibleByArgument {}

extension Scenario.Layout: ExpressibleByArgument {}

extension LogFormat: ExpressibleByArgument {}

extension ResolveAccess: ExpressibleByArgument {}
extension Registration: ExpressibleByArgument {}
