// The commons every module of the package shares (error codes, the clocks, JSON text, bounded file reads) live
// one level below, in VideoCaptureCommons, so that the transport modules (RTP, WebRTC, the servers) need not
// import the capture module for them. Importing VideoCapture brings them along, as before.
@_exported import VideoCaptureCommons
