#!/usr/bin/env bash
# The Java user's path, with Debian's packages (clients/java/README.md):
#   apt-get install default-jdk-headless protobuf-compiler protobuf-compiler-grpc-java-plugin \
#       libgrpc-java libprotobuf-java libnetty-java libperfmark-java
#   clients/java/build.sh OUT_DIR        # generates, compiles, leaves classes in OUT_DIR/classes
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
protos="$here/../../protos"
out=${1:?usage: build.sh OUT_DIR}
mkdir -p "$out/gen" "$out/classes"
protoc -I "$protos" --java_out="$out/gen" --grpc-java_out="$out/gen" --plugin=protoc-gen-grpc-java=/usr/bin/grpc_java_plugin \
    "$protos"/gym_metrics/v1/*.proto "$protos"/google/rpc/status.proto "$protos"/google/rpc/error_details.proto
find "$out/gen" -name '*.java' > "$out/sources.txt"
echo "$here/Example.java" >> "$out/sources.txt"
# javac's notes are noise; its errors are not: a failed compile fails the build, whatever an
# earlier build left in OUT_DIR
if ! javac -nowarn -encoding UTF-8 -cp '/usr/share/java/*' -d "$out/classes" @"$out/sources.txt" >"$out/javac.log" 2>&1; then
    grep -v '^Note:' "$out/javac.log" >&2 || true
    echo "build.sh: javac failed (its messages above)" >&2
    exit 1
fi
grep -v '^Note:' "$out/javac.log" || true
test -f "$out/classes/Example.class"
echo "built $out/classes (run: java -cp '$out/classes:/usr/share/java/*' Example HOST:PORT)"
