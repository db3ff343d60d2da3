import Synchronization
import VideoCaptureCommons

/// How many wrong Digest answers the server checks, per client address and in all, before it stops checking
/// (OpenSSH's PerSourcePenalties and MaxStartups, as token buckets): each wrong answer takes a token, tokens come
/// back at a steady rate, and an address (or the server) without tokens has its answers refused unchecked
/// (503 with `Retry-After`, the connection closed) until one has come back. Past `freeFailures` wrong answers
/// in a row from an address, each 401 is also held back `delayNs` times the excess (at most `maxDelayNs`) before
/// it is sent, with nothing else read from that connection meanwhile, and `failuresPerConnection` wrong answers
/// in a row close the connection. A right answer clears the address's record.
public struct AuthenticationBudget: Sendable, Equatable {
    /// Wrong answers an address may give at once (the bucket's size), and how many more it may give per second.
    public var perAddressBurst = 5, perAddressPerSecond = 1.0
    /// Wrong answers all addresses together may give at once, and how many more per second.
    public var globalBurst = 40, globalPerSecond = 20.0
    /// Wrong answers in a row from an address answered at once; each one after them is delayed.
    public var freeFailures = 2
    /// The delay per wrong answer past `freeFailures` (250 ms), and the longest delay (2 s), in nanoseconds.
    public var delayNs: Int64 = 250_000_000, maxDelayNs: Int64 = 2_000_000_000
    /// Wrong answers in a row on one connection after which it is closed (with the last 401).
    public var failuresPerConnection = 3
    /// Addresses remembered at once (the oldest record is forgotten beyond it).
    public var maxAddresses = 4096
    /// The defaults above: at most 5 + 1 wrong answers a second from an address, 40 + 20 a second in all.
    public init() {}
}

/// The failure budgets of `AuthenticationBudget`, shared by every connection of a hub.
final class AuthThrottle: Sendable {
    private struct Bucket {
        var tokens: Double
        var updatedNs: Int64
        var inARow = 0
    }
    private struct State {
        var global: Bucket
        var addresses: [String: Bucket] = [:]
    }
    let budget: AuthenticationBudget
    private let state: Mutex<State>

    init(_ budget: AuthenticationBudget, nowNs: Int64 = monotonicNanoseconds()) {
        self.budget = budget
        state = Mutex(State(global: Bucket(tokens: Double(budget.globalBurst), updatedNs: nowNs)))
    }

    private func refill(_ b: inout Bucket, burst: Int, rate: Double, now: Int64) {
        let elapsed = Double(max(0, now - b.updatedNs)) / 1e9
        b.tokens = min(Double(burst), b.tokens + elapsed * rate)
        b.updatedNs = now
    }

    /// Whether an answer from `address` may be checked now; when not, the seconds until it may be.
    func mayCheck(_ address: String, nowNs: Int64 = monotonicNanoseconds()) -> (allowed: Bool, retryAfterSeconds: Int) {
        let b = budget
        return state.withLock { s in
            refill(&s.global, burst: b.globalBurst, rate: b.globalPerSecond, now: nowNs)
            var wait = 0.0
            if s.global.tokens < 1 { wait = (1 - s.global.tokens) / b.globalPerSecond }
            if var a = s.addresses[address] {
                refill(&a, burst: b.perAddressBurst, rate: b.perAddressPerSecond, now: nowNs)
                s.addresses[address] = a
                if a.tokens < 1 { wait = max(wait, (1 - a.tokens) / b.perAddressPerSecond) }
            }
            return (wait == 0, wait == 0 ? 0 : max(1, Int(wait.rounded(.up))))
        }
    }

    /// A wrong answer from `address`: takes a token from its bucket and the global one; returns how long its
    /// 401 is held back.
    func failed(_ address: String, nowNs: Int64 = monotonicNanoseconds()) -> Int64 {
        let b = budget
        return state.withLock { s -> Int64 in
            refill(&s.global, burst: b.globalBurst, rate: b.globalPerSecond, now: nowNs)
            s.global.tokens = max(-1, s.global.tokens - 1)
            var a = s.addresses[address] ?? Bucket(tokens: Double(b.perAddressBurst), updatedNs: nowNs)
            refill(&a, burst: b.perAddressBurst, rate: b.perAddressPerSecond, now: nowNs)
            a.tokens = max(-1, a.tokens - 1)
            a.inARow += 1
            if s.addresses[address] == nil && s.addresses.count >= b.maxAddresses {
                // Forget the record that has been quiet longest (a full bucket is no record at all).
                if let oldest = s.addresses.min(by: { $0.value.updatedNs < $1.value.updatedNs })?.key { s.addresses[oldest] = nil }
            }
            s.addresses[address] = a
            let excess = a.inARow - b.freeFailures
            return excess > 0 ? min(b.maxDelayNs, Int64(excess) * b.delayNs) : 0
        }
    }

    /// A right answer from `address`: its run of wrong ones is over (its bucket still refills at its pace).
    func succeeded(_ address: String) {
        state.withLock { s in
            guard var a = s.addresses[address] else { return }
            a.inARow = 0
            s.addresses[address] = a
        }
    }
}
