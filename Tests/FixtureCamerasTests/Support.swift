@_exported import MediaTestSupport

let scratchDir = scratchDirectory("fixture-tests")
