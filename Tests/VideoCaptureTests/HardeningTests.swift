// Issue 11: arithmetic on values from outside (fixture files, drivers, callers) never traps.
import Testing
@testable import VideoCapture

// MARK: - Fraction and negotiation arithmetic never trap

@Test func fractionArithmeticIsChecked() {
    #expect(Fraction(exactly: 1, 0) == nil)
    #expect(Fraction(exactly: .min, 1) == nil)
    #expect(Fraction(exactly: 6, -4) == Fraction(-3, 2))
    let big = Fraction(Int64.max), tiny = Fraction(1, Int64.max)
    #expect(big.adding(big) == nil)
    #expect(tiny.adding(Fraction(1, Int64.max - 1)) == nil)
    #expect(big.multiplied(by: 2) == nil)
    #expect(Fraction(1, 3).adding(Fraction(1, 6)) == Fraction(1, 2))
    #expect(Fraction(1, 2).subtracting(Fraction(1, 3)) == Fraction(1, 6))
    #expect(Fraction.wholeSteps(Fraction(1), Fraction(1, 60)) == 60)
    #expect(Fraction.wholeSteps(big, tiny) == nil)
    #expect(Fraction.wholeSteps(Fraction(1), Fraction(0)) == nil)
    #expect(Fraction(approximating: .infinity) == nil)
    #expect(Fraction(approximating: 1e19) == nil)
    #expect(Fraction(approximating: 29.97) == Fraction(2997, 100))
    #expect(threeDecimals(1e300) == "1e+300")
    #expect(big.description == "9223372036854775807")
}

@Test func negotiationWithExtremeValuesDoesNotTrap() {
    // Built directly (not through the parser), as a driver or a caller might.
    let extreme = FrameIntervals.stepwise(min: Fraction(1, Int64.max), max: Fraction(Int64.max), step: Fraction(1, Int64.max - 1))
    #expect(extreme.bestRate(limit: Fraction(30)) == Fraction(30)) // too fine to step exactly: taken as continuous
    #expect(FrameIntervals.continuous(min: Fraction(0), max: Fraction(1)).bestRate(limit: Fraction(30)) == nil)
    #expect(FrameIntervals.discrete([Fraction(0)]).rateBounds == nil)
    let wide = FrameSizeRange.stepwise(
        min: FrameSize(width: 2, height: 2), max: FrameSize(width: Int.max, height: Int.max),
        step: FrameSize(width: Int.max - 3, height: 2))
    #expect(wide.closest(to: FrameSize(width: Int.max, height: 7)) == FrameSize(width: Int.max - 1, height: 6))
    let formats = [CaptureFormat(pixelFormat: .yuyv, size: wide, intervals: extreme, formatDescription: "x")]
    let s = FormatSelector.select(from: formats, target: FrameSize(width: Int.max, height: Int.max), fpsLimit: 0)
    #expect(s?.fps == Fraction(1))
    #expect(FormatSelector.select(from: formats, target: FrameSize(width: Int.min, height: -5), fpsLimit: Int.max) != nil)
}
