import VideoProcessing
@_exported import MediaTestSupport

let scratchDir = scratchDirectory("vp-tests")
