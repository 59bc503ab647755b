package gymmetrics

import (
	"context"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// DialOptions say how to reach a server beyond its address.
type DialOptions struct {
	// Token, when not "", is sent as `authorization: Bearer <Token>` metadata on every call
	// (a server run with --auth-token-env requires it).
	Token string
	// TLSCA, when not "", is a PEM root certificate file: the connection uses TLS, trusting it.
	TLSCA string
}

// Dial connects to a gym-metrics server (`serve`) or job server (`jobs serve`), HOST:PORT,
// with the message limits of the server (MaxMessageBytes both ways: an AggregateMetrics part
// may pass gRPC's 4 MiB default). It does not wait for the connection: a call to a server that
// is not there fails at once with UNAVAILABLE and its cause (connection refused, say).
func Dial(target string, o DialOptions) (*grpc.ClientConn, error) {
	options := []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
	}
	if o.TLSCA != "" {
		creds, err := credentials.NewClientTLSFromFile(o.TLSCA, "")
		if err != nil {
			return nil, fmt.Errorf("TLS root certificate %s: %v", o.TLSCA, err)
		}
		options = append(options, grpc.WithTransportCredentials(creds))
	} else {
		options = append(options, grpc.WithInsecure())
	}
	if o.Token != "" {
		options = append(options, grpc.WithPerRPCCredentials(bearer(o.Token)))
	}
	return grpc.Dial(target, options...)
}

// TokenFromEnv is the bearer token in the environment variable named var ("" when var is "");
// a named variable that is unset or empty is an error, never a silent unauthenticated call.
// The token itself is never in an error.
func TokenFromEnv(variable string) (string, error) {
	if variable == "" {
		return "", nil
	}
	token := strings.TrimSpace(os.Getenv(variable)) // a secret mounted from a file ends with its newline
	if token == "" {
		return "", fmt.Errorf("auth token variable %s is not set or empty", variable)
	}
	for _, c := range token {
		if c < ' ' || c > '~' {
			return "", fmt.Errorf("auth token variable %s holds characters a header cannot carry (only printable ASCII)", variable)
		}
	}
	return token, nil
}

type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

// RequireTransportSecurity is false: a token over plaintext is the caller's choice (127.0.0.1,
// a private network), as with the Python client.
func (bearer) RequireTransportSecurity() bool { return false }
