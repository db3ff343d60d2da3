import Foundation
import TestSupport

let work = scratchDirectory("capture-pipeline-tests")

@discardableResult
func sh(_ tool: String, _ args: [String]) throws -> ToolResult { try runTool(tool, args, in: work) }
