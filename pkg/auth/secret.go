package auth

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// maxKeyFileBytes bounds what ReadSecretFile and LoadVerifier read.
const maxKeyFileBytes = 1 << 20

// ReadSecretFile returns the text of the file at path with its trailing line
// endings ("\n", "\r\n") trimmed. An empty secret is an error.
func ReadSecretFile(path string) ([]byte, error) {
	b, err := readKeyFile(path)
	if err != nil {
		return nil, fmt.Errorf("read secret file: %w", err)
	}
	secret := strings.TrimRight(string(b), "\r\n")
	if secret == "" {
		return nil, fmt.Errorf("read secret file %s: empty", path)
	}
	return []byte(secret), nil
}

func readKeyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > maxKeyFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxKeyFileBytes)
	}
	return b, nil
}
