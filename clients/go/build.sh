#!/usr/bin/env bash
# Build (and test) the Go client offline with Debian's Go packages:
#   apt-get install golang-go golang-google-grpc-dev golang-google-protobuf-dev golang-google-genproto-dev
#   clients/go/build.sh [OUT_DIR]     # builds OUT_DIR/gym-metrics-go and runs go vet and go test
# Debian ships Go modules as source under /usr/share/gocode, for GOPATH mode: this script lays
# the client at its import path in a temporary GOPATH beside them. With the Go module proxy
# reachable, `go mod tidy && go build ./...` in clients/go does the same in module mode.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/bin}
gopath=$(mktemp -d)
trap 'rm -rf "$gopath"' EXIT
mkdir -p "$out"
export GOPATH="$gopath:/usr/share/gocode" GO111MODULE=off GOFLAGS=
# the import path is .../clients/go: a directory of that name pointing at this one
mkdir -p "$gopath/src/github.com/gym-metrics/gym-metrics/clients"
ln -s "$here" "$gopath/src/github.com/gym-metrics/gym-metrics/clients/go"
cd "$gopath/src/github.com/gym-metrics/gym-metrics/clients/go"
pkg=github.com/gym-metrics/gym-metrics/clients/go
go vet "$pkg/gymmetrics" "$pkg/cmd/gym-metrics-go"
go test "$pkg/gymmetrics"
go build -o "$out/gym-metrics-go" "$pkg/cmd/gym-metrics-go"
echo "built $out/gym-metrics-go"
