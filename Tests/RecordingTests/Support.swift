@_exported import MediaTestSupport

let scratch = scratchDirectory("recording-tests")
