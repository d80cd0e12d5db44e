package wake

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// notification is the body of a webhook request.
type notification struct {
	SubscriptionID string       `json:"subscription_id"`
	WakeID         string       `json:"wake_id"`
	Generation     int64        `json:"generation"`
	Streams        []StreamInfo `json:"streams"`
	CallbackURL    string       `json:"callback_url"`
	CallbackToken  string       `json:"callback_token"`
}

// deliver sends s's wake to its webhook, on a goroutine of its own, so
// that neither appends nor the manager wait on a receiver. m.mu is held.
func (m *Manager) deliver(s *sub) {
	if m.closing() {
		return // bg is waited on, or about to be: add nothing to it
	}
	if m.baseURL() == "" {
		// Stored before the server lost its public URL: there is no
		// callback URL to give the receiver.
		m.log.Warn("webhook not delivered: the server has no public URL (tether serve --public-url)", "subscription", s.rec.ID)
		m.scheduleRetry(s)
		return
	}
	// A token of its own for each try: a wake delivered after an hour of
	// retries still gets one that is valid.
	s.token = m.keys.token(s.rec.ID, s.rec.Generation, m.opts.Now())
	body, _ := json.Marshal(notification{SubscriptionID: s.rec.ID, WakeID: s.wakeID, Generation: s.rec.Generation,
		Streams: m.infos(s), CallbackURL: m.actionURL(s, "callback"), CallbackToken: s.token})
	wid, target := s.wakeID, s.rec.WebhookURL
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		done, err := m.post(target, body)
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.subs[s.rec.ID] != s || s.wakeID != wid {
			return // the wake ended meanwhile (acknowledged, expired, deleted)
		}
		if err != nil {
			m.log.Warn("webhook delivery failed", "subscription", s.rec.ID, "err", err)
			m.scheduleRetry(s)
			return
		}
		s.status, s.retries = "active", 0
		if !done {
			// The receiver has the wake: its lease starts.
			m.extendLease(s)
			return
		}
		for p, tail := range s.snapshot {
			if l := s.rec.Links[p]; l != nil && tail > l.Acked {
				l.Acked = tail
			}
		}
		m.save(s)
		m.endWake(s)
		m.triggerNext(s)
	}()
}

// post sends one notification; done is the receiver's {"done": true}.
func (m *Manager) post(target string, body []byte) (done bool, err error) {
	req, err := http.NewRequestWithContext(m.ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Webhook-Signature", m.keys.sign(body, m.opts.Now()))
	resp, err := m.opts.Client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		// The code only: the reason phrase is the receiver's own text.
		return false, errors.New("webhook answered HTTP " + strconv.Itoa(resp.StatusCode))
	}
	var out struct {
		Done bool `json:"done"`
	}
	_ = json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 64<<10)).Decode(&out)
	return out.Done, nil
}

// scheduleRetry delivers s's wake again after a backoff. m.mu is held.
func (m *Manager) scheduleRetry(s *sub) {
	if m.ctx.Err() != nil {
		return
	}
	s.retries++
	s.status = "failed"
	d := min(time.Second<<min(s.retries-1, 10), maxRetryDelay)
	d += time.Duration((rand.Float64()*0.4 - 0.2) * float64(d))
	stopTimer(&s.retry)
	wid := s.wakeID
	s.retry = time.AfterFunc(d, func() {
		defer timerDone()
		timerFired()
		m.mu.Lock()
		defer m.mu.Unlock()
		if !m.closing() && m.subs[s.rec.ID] == s && s.wakeID == wid {
			m.deliver(s)
		}
	})
}
