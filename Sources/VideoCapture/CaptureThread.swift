import Foundation
import Synchronization

/// A stream's dedicated thread. `join()` waits for it to end (any number of times, from any thread); called
/// from the thread itself (a stream stopping on its own error path) it returns at once instead of deadlocking.
package final class CaptureThread: Sendable {
    private let finished = DispatchSemaphore(value: 0)
    private let threadID = Mutex<pthread_t?>(nil)

    package init(name: String, body: @escaping @Sendable () -> Void) {
        let t = Thread { [self] in
            threadID.withLock { $0 = pthread_self() }
            body()
            finished.signal()
        }
        t.name = name
        t.qualityOfService = .userInteractive
        t.start()
    }

    package func join() {
        let onOwnThread = threadID.withLock { id in id.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
        if onOwnThread { return }
        finished.wait()
        finished.signal()   // stays signalled: later joins return at once
    }
}
