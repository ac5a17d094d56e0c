package registry_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/cyberos/mcpd/pkg/registry"
)

// TestValidateCapabilityDepth: a capability advertisement nests objects
// and arrays at most registry.MaxCapabilityDepth levels deep, the
// advertisement being the first; deeper is a FieldError on
// capability_advertisement at any depth, measured without recursion.
// Brackets inside strings do not count.
func TestValidateCapabilityDepth(t *testing.T) {
	t.Parallel()
	nested := func(depth int) string { // the object, then arrays
		return `{"a":` + strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1) + `}`
	}
	objects := func(depth int) string {
		return strings.Repeat(`{"a":`, depth) + `1` + strings.Repeat(`}`, depth)
	}
	for _, c := range []struct {
		name string
		caps string
		ok   bool
	}{
		{"arrays at the limit", nested(registry.MaxCapabilityDepth), true},
		{"objects at the limit", objects(registry.MaxCapabilityDepth), true},
		{"brackets in strings", `{"a":"` + strings.Repeat("[{", 100) + `","b\"[":["]]]]"]}`, true},
		{"arrays past the limit", nested(registry.MaxCapabilityDepth + 1), false},
		{"objects past the limit", objects(registry.MaxCapabilityDepth + 1), false},
		{"5,000 levels", nested(5000), false},
		{"past encoding/json's 10,000", nested(50000), false},
	} {
		info := validInfo()
		info.CapabilityAdvertisement = json.RawMessage(c.caps)
		err := info.Validate()
		if c.ok {
			if err != nil {
				t.Errorf("%s: Validate = %v, want nil", c.name, err)
			}
			continue
		}
		var fe *registry.FieldError
		if !errors.As(err, &fe) || fe.Field != "capability_advertisement" || fe.Reason != registry.DepthReason(registry.MaxCapabilityDepth) {
			t.Errorf("%s: Validate = %v, want a FieldError on capability_advertisement: %s", c.name, err,
				registry.DepthReason(registry.MaxCapabilityDepth))
		}
	}
}
