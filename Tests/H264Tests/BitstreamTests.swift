import Testing
@testable import H264

@Test func splitsThreeAndFourByteStartCodes() throws {
    let data: [UInt8] = [0, 0, 0, 1, 0x67, 1, 2, 0, 0, 1, 0x68, 3, 0, 0, 0, 1, 0x65, 4, 5, 6]
    let units = try AnnexB.split(data)
    #expect(units.map(\.type) == [.sps, .pps, .idr])
    #expect(units.map(\.offset) == [4, 10, 16])
    #expect(units.map(\.length) == [3, 2, 4])
}

@Test func avccRoundTrips() throws {
    let annexB: [UInt8] = [0, 0, 0, 1, 0x67, 9, 9, 0, 0, 1, 0x68, 7, 0, 0, 0, 1, 0x41, 1, 2, 3, 4]
    let avcc = try AnnexB.toAVCC(annexB)
    #expect(avcc == [0, 0, 0, 3, 0x67, 9, 9, 0, 0, 0, 2, 0x68, 7, 0, 0, 0, 5, 0x41, 1, 2, 3, 4])
    let back = try AnnexB.fromAVCC(avcc)
    #expect(try AnnexB.split(back).map(\.type) == [.sps, .pps, .slice])
    #expect(try AnnexB.toAVCC(back) == avcc)
    #expect(try AnnexB.fromAVCC(try AnnexB.toAVCC(annexB, lengthSize: 2), lengthSize: 2) == back)
}

@Test func malformedInputIsAnError() {
    #expect(throws: BitstreamError.self) { try AnnexB.split([0x67, 1, 2]) } // no start code
    #expect(throws: BitstreamError.self) { try AnnexB.split([0, 0, 1, 0, 0, 1, 0x67]) } // zero-length unit
    #expect(throws: BitstreamError.self) { try AnnexB.split([0, 0, 1, 0x67, 0, 0, 1]) } // start code at the end
    #expect(throws: BitstreamError.self) { try AnnexB.split([0, 0, 1, 0xE7]) } // forbidden bit
    #expect(throws: BitstreamError.self) { try AnnexB.fromAVCC([0, 0, 0, 9, 0x67, 1]) } // length past the end
    #expect(throws: BitstreamError.self) { try AnnexB.fromAVCC([0, 0, 0, 0]) } // zero length
    #expect(throws: BitstreamError.self) { try AnnexB.fromAVCC([0, 0, 1]) } // truncated prefix
    #expect(throws: BitstreamError.self) { try AnnexB.toAVCC([0, 0, 1, 0x67], lengthSize: 3) }
    #expect(throws: BitstreamError.self) { try SequenceParameterSet(nal: [0x67, 0x42][...]) } // truncated SPS
    #expect(throws: BitstreamError.self) { try SequenceParameterSet(nal: [0x68, 0x42, 0, 0][...]) } // not an SPS
}

@Test func fuzzedInputNeverCrashes() {
    var rng = SystemRandomNumberGenerator()
    var parsed = 0
    for i in 0..<20_000 {
        let n = Int.random(in: 0..<64, using: &rng)
        var bytes = (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }
        // Bias towards start codes and small lengths so the interesting paths run.
        if i % 2 == 0, n > 4 {
            bytes[0] = 0
            bytes[1] = 0
            bytes[2] = 1
            if n > 8 {
                bytes[6] = 0
                bytes[7] = 0
                bytes[8] = 1
            }
        }
        if i % 3 == 0, n > 4 {
            bytes[0] = 0
            bytes[1] = 0
            bytes[2] = 0
            bytes[3] = UInt8.random(in: 0...8, using: &rng)
        }
        if let units = try? AnnexB.split(bytes) {
            parsed += 1
            for u in units {
                #expect(u.offset >= 0 && u.offset + u.length <= bytes.count && u.length > 0)
                if u.type == .sps { _ = try? SequenceParameterSet(nal: bytes[u.offset..<(u.offset + u.length)]) }
            }
        }
        _ = try? AnnexB.fromAVCC(bytes)
        _ = try? AnnexB.fromAVCC(bytes, lengthSize: 1)
        _ = try? AnnexB.toAVCC(bytes)
        if n > 1 {
            bytes[0] = 0x67
            _ = try? SequenceParameterSet(nal: bytes[...])
        }
    }
    #expect(parsed > 100)
}
