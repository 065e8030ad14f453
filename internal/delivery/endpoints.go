package delivery

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"unicode/utf8"
)

// Endpoint is where a merchant takes its events, and the secrets its
// deliveries are signed with (several while one is being rotated).
type Endpoint struct {
	MerchantID string
	URL        string
	Secrets    []string
}

// MinSecretLen is the shortest signing secret accepted.
const MinSecretLen = 16

// ParseEndpoints reads endpoints as `<merchant> <url> <secret>[,<secret>…]`,
// one per line or separated by ";"; blank lines and lines starting with #
// are skipped. A URL must be https, or http on a loopback address. Errors
// name the line, never a secret.
func ParseEndpoints(text string) ([]Endpoint, error) {
	var (
		out  []Endpoint
		errs []error
		seen = map[string]bool{}
	)
	n := 0
	for line := range strings.SplitSeq(strings.ReplaceAll(text, ";", "\n"), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		n++
		f := strings.Fields(line)
		if len(f) != 3 {
			errs = append(errs, fmt.Errorf("webhook %d: want `<merchant> <url> <secret>[,<secret>…]`", n))
			continue
		}
		e := Endpoint{MerchantID: f[0], URL: f[1], Secrets: strings.Split(f[2], ",")}
		if err := checkURL(e.URL); err != nil {
			errs = append(errs, fmt.Errorf("webhook %d (merchant %s): %w", n, e.MerchantID, err))
			continue
		}
		for _, s := range e.Secrets {
			if utf8.RuneCountInString(s) < MinSecretLen {
				errs = append(errs, fmt.Errorf("webhook %d (merchant %s): every secret must have at least %d characters", n, e.MerchantID, MinSecretLen))
				break
			}
		}
		if seen[e.MerchantID] {
			errs = append(errs, fmt.Errorf("webhook %d: merchant %s has a webhook already", n, e.MerchantID))
		}
		seen[e.MerchantID] = true
		out = append(out, e)
	}
	return out, errors.Join(errs...)
}

func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return errors.New("the URL is not an absolute http or https URL")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		host := u.Hostname()
		if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
		return errors.New("the URL must be https (http only on a loopback address): events carry orders")
	}
	return errors.New("the URL is not an absolute http or https URL")
}
