package froog_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"froog.tech/froog/froog"
)

// The docs' Go example, as it is written there (compiled, not run: it
// needs a froog).
func Example() {
	ctx := context.Background()
	c := froog.New("") // FROOG_API_KEY from the environment
	sb, err := c.Sandboxes.Create(ctx, froog.CreateSandbox{Size: froog.Ptr(froog.SizeSmall)})
	if err != nil {
		var fe *froog.Error
		if errors.As(err, &fe) {
			fmt.Println(fe.Status, fe.Code, fe.Message, fe.RequestID)
		}
		return
	}
	defer sb.Delete(context.Background())
	r, err := sb.Exec(ctx, "uname -a", &froog.ExecOptions{Cwd: "/tmp", Timeout: time.Minute})
	if err != nil {
		return
	}
	fmt.Print(r.Stdout, r.ExitCode)
	for e, err := range sb.ExecStream(ctx, "make test", nil) {
		if err != nil {
			return
		}
		if e.Type == froog.ExecEventTypeStdout {
			fmt.Print(froog.Text(e.Data))
		}
	}
	server, _ := sb.Spawn(ctx, "npm run dev", &froog.ExecOptions{Cwd: "app", Env: map[string]string{"PORT": "3000"}})
	sb.WaitForPort(ctx, 3000, time.Minute)
	u, _ := sb.Host(ctx, froog.HostPort{Port: 3000})
	fmt.Println(u.Url)
	server.Kill(ctx)
}
