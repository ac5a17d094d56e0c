package agent

// deniedCount is how many answers 401 or 403 the MCP server gave so far.
func (a *Agent) deniedCount() int64 {
	if a.mcpTr == nil {
		return 0
	}
	return a.mcpTr.Denied()
}
