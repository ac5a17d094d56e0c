package cli

import (
	"context"
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/cyberos/mcpd/pkg/output"
	"github.com/cyberos/mcpd/pkg/version"
)

type versionOptions struct {
	IO      *IOStreams
	Printer *output.Printer
}

// versionInfo is the JSON and YAML form of mcpctl version.
type versionInfo struct {
	Version   string `json:"version"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
}

func newCmdVersion(f *Factory, runF func(*versionOptions) error) *cobra.Command {
	opts := &versionOptions{IO: f.IOStreams}
	return &cobra.Command{
		Use:         "version",
		Short:       "Print the version of mcpctl",
		Args:        exactArgs(),
		Annotations: map[string]string{annotationSkipConfig: ""},
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The output flag is read here: version needs no configuration.
			format, err := output.ParseFormat(cmd.Flag("output").Value.String())
			if err != nil {
				return &UsageError{Err: err}
			}
			opts.Printer = f.printer()
			opts.Printer.Format = format
			if runF != nil {
				return runF(opts)
			}
			return failed(versionRun(cmd.Context(), opts))
		},
	}
}

func versionRun(_ context.Context, opts *versionOptions) error {
	info := versionInfo{Version: version.Version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if opts.Printer.Format.Structured() {
		return opts.Printer.Object(info, nil)
	}
	_, err := fmt.Fprintf(opts.IO.Out, "mcpctl %s (%s, %s)\n", info.Version, info.GoVersion, info.Platform)
	return err
}
