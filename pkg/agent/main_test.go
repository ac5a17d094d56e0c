package agent

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/cyberos/mcpd/pkg/mcpinspect/mcptest"
)

func TestMain(m *testing.M) {
	mcptest.ServeIfAsked()
	goleak.VerifyTestMain(m)
}
