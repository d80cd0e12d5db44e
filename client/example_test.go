package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"

	tether "github.com/tetherhq/tether"
	"github.com/tetherhq/tether/client"
)

// Start a run on a new thread and print its answer as it streams.
func Example() {
	ctx := context.Background()
	c := client.New("http://127.0.0.1:8080", nil)
	th, err := c.CreateThread(ctx, "", nil)
	if err != nil {
		log.Fatal(err)
	}
	run, err := c.CreateRun(ctx, th.ID, client.RunRequest{
		Agent: "demo",
		Input: tether.RunInput{Messages: []tether.InputMessage{{Role: tether.RoleUser, Content: "Hello"}}},
	})
	if err != nil {
		log.Fatal(err)
	}
	for u, err := range c.Subscribe(ctx, client.SubscribeRequest{RunID: run.ID, After: tether.OffsetStart}) {
		if err != nil {
			log.Fatal(err)
		}
		switch u.Event.Type {
		case tether.EventTextDelta:
			fmt.Print(u.Event.Delta)
		case tether.EventRunFinished:
			fmt.Println("\nrun ended", u.Event.Status)
		}
	}
}

// Follow a whole thread: a snapshot first, then every event, across
// reconnects, until ctx is done.
func ExampleClient_Subscribe() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := client.New("http://127.0.0.1:8080", &client.Options{Token: "secret"})
	req := client.SubscribeRequest{
		ThreadID: "t1",
		OnState:  func(s client.State) { log.Println("stream", s) },
	}
	for u, err := range c.Subscribe(ctx, req) {
		if err != nil {
			log.Println(err)
			return
		}
		if u.Snapshot != nil {
			fmt.Println("snapshot at", u.Snapshot.Offset, "with", len(u.Snapshot.Messages), "messages")
			continue
		}
		fmt.Println(u.Event.Offset, u.Event.Type)
	}
}

// A user's client with short-lived tokens: the function asks the app's
// backend, which knows the user, for a JWT valid a few minutes. The
// client asks again before its exp, and when the server says it expired.
func ExampleOptions_tokenFunc() {
	const tokenURL = "https://app.example.com/auth/tether-token"
	c := client.New("https://tether.example.com", &client.Options{
		TokenFunc: func(ctx context.Context) (string, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, tokenURL, nil)
			if err != nil {
				return "", err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return "", err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return "", fmt.Errorf("token: %s", resp.Status)
			}
			var out struct {
				Token string `json:"token"`
			}
			err = json.NewDecoder(resp.Body).Decode(&out)
			return out.Token, err
		},
	})
	threads, _, err := c.Threads(context.Background(), client.ThreadQuery{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(threads), "threads")
}
