// The HTTP edge serves the ledger's domain API: whoever imports it gets the store protocol, the engine and the
// domain error too.
@_exported public import GotchuLedger
