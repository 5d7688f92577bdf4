package cli

import (
	"time"

	"github.com/corepin/corepin/agent"
)

// agentRunning reports whether an agent answers on its default socket,
// and that socket: a BE batch leaves the QoS loop to it then.
func agentRunning() (string, bool) {
	c := agent.NewClient(agent.DefaultSocket, "")
	c.SetTimeout(500 * time.Millisecond)
	return agent.DefaultSocket, c.Healthy() == nil
}
