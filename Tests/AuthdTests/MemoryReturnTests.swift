import Testing
@testable import authd

@Suite("Giving memory back after a flood of connections")
struct MemoryReturnTests {
    /// The connections left after each close, in order; the indices of the closes that return memory.
    static func returns(_ remaining: [Int], minimumGone: Int = 32) -> [Int] {
        var ebb = FloodEbb(minimumGone: minimumGone)
        return remaining.indices.filter { ebb.closed(remaining: remaining[$0]) }
    }

    @Test("a flood of 1,000 draining gives memory back at half, a quarter, …, and when the last has gone")
    func floodDrains() {
        let closes = Array((0..<1000).reversed())  // 999 left, 998, … 0
        #expect(Self.returns(closes).map { closes[$0] } == [500, 250, 125, 62, 30, 0])
    }

    @Test("connections that come and go one by one never trigger it; a few dozen held and closed do", arguments: [
        (Array(repeating: 0, count: 500), [Int]()),                 // one connection at a time, 500 times
        (Array(repeating: 3, count: 500), []),                      // four at a time
        (Array((0..<31).reversed()), []),                           // 31 held, then all closed: too few
        (Array((0..<40).reversed()), [8, 0]),                       // 40 held: when 32 have gone, and at the end
    ] as [([Int], [Int])])
    func smallChurn(remaining: [Int], expected: [Int]) {
        #expect(Self.returns(remaining).map { remaining[$0] } == expected)
    }

    @Test("a device's links staying up do not stop it: the flood around them drains")
    func linksStay() {
        // 10 links stay open; 600 other connections come and go.
        let closes = Array((10..<610).reversed())
        #expect(Self.returns(closes).map { closes[$0] } == [305, 152, 76, 38])
    }
}
