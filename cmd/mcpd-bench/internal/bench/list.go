package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/cyberos/mcpd/pkg/client"
)

// ListPage times GET /v1/mcp/servers?limit=page of a tenant that has
// exactly page servers, one call at a time, for d (at most maxCalls).
func ListPage(ctx context.Context, c *client.Client, page int, d time.Duration, maxCalls int64) LoadResult {
	return ClosedLoop(ctx, 1, d, maxCalls, func(ctx context.Context, _ int64) error {
		list, err := c.Servers(ctx, client.ListServersParams{Limit: page})
		if err != nil {
			return err
		}
		if len(list.Servers) != page {
			return fmt.Errorf("list: %d servers, want %d", len(list.Servers), page)
		}
		return nil
	})
}

// ListPaging times each page of a walk through every server of a tenant
// that has servers of them, page at a time by the cursor, one call at a time,
// walking again from the start when done, for d (at most maxCalls pages).
func ListPaging(ctx context.Context, c *client.Client, page, servers int, d time.Duration, maxCalls int64) LoadResult {
	var (
		cursor string
		seen   int
	)
	return ClosedLoop(ctx, 1, d, maxCalls, func(ctx context.Context, _ int64) error {
		list, err := c.Servers(ctx, client.ListServersParams{Limit: page, Cursor: cursor})
		if err != nil {
			cursor, seen = "", 0
			return err
		}
		seen += len(list.Servers)
		if list.NextCursor == nil {
			if seen != servers {
				err = fmt.Errorf("paging: walked %d servers, want %d", seen, servers)
			}
			cursor, seen = "", 0
			return err
		}
		cursor = *list.NextCursor
		return nil
	})
}
