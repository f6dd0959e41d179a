#!/bin/bash
# Makes what a deployment over gRPC needs (docs/deployment.md): a CA, a server
# certificate for the hosts the clients dial, one certificate and one token per
# client, and the server's token file.
#
#   bazel run //tools:deploy_credentials -- --out=DIR --clients=N [--host=NAME_OR_IP ...]
#
# DIR gets ca.pem (give it to every client), ca.key (keep it offline), server.pem
# and server.key (the server's), client<k>.pem, client<k>.key and token<k>.txt
# (client k's), and tokens.txt (the server's "<id> <token>" lines). The server
# certificate is valid for localhost, 127.0.0.1 and every --host. Keys and tokens
# are readable by their owner only. Refuses to overwrite an existing DIR/ca.pem.
set -euo pipefail

out=""
clients=""
hosts=()
for arg in "$@"; do
  case "$arg" in
    --out=*) out="${arg#*=}" ;;
    --clients=*) clients="${arg#*=}" ;;
    --host=*) hosts+=("${arg#*=}") ;;
    *) echo "deploy_credentials: unknown argument $arg" >&2; exit 2 ;;
  esac
done
if [[ -z "$out" ]] || ! [[ "$clients" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: deploy_credentials --out=DIR --clients=N [--host=NAME_OR_IP ...]" >&2
  exit 2
fi
[[ "$out" = /* || -z "${BUILD_WORKING_DIRECTORY:-}" ]] || out="$BUILD_WORKING_DIRECTORY/$out"
command -v openssl > /dev/null || { echo "deploy_credentials: openssl is not installed" >&2; exit 2; }
if [[ -e "$out/ca.pem" ]]; then
  echo "deploy_credentials: $out/ca.pem exists; remove $out to make new credentials" >&2
  exit 2
fi
mkdir -p "$out"
umask 077

names="DNS:localhost, IP:127.0.0.1"
ip_pattern='^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$|:'
for host in "${hosts[@]}"; do
  if [[ "$host" =~ $ip_pattern ]]; then names+=", IP:$host"; else names+=", DNS:$host"; fi
done
config="$out/openssl.cnf"
cat > "$config" <<CONFIG
[req]
distinguished_name = dn
prompt = no
[dn]
CN = fedkit
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
[server]
subjectAltName = $names
basicConstraints = CA:FALSE
keyUsage = digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth
[client]
basicConstraints = CA:FALSE
keyUsage = digitalSignature, keyEncipherment
extendedKeyUsage = clientAuth
CONFIG

# sign NAME SUBJECT EXTENSIONS: NAME.key and NAME.pem signed by the CA.
sign() {
  openssl req -newkey rsa:2048 -nodes -keyout "$out/$1.key" -out "$out/$1.csr" -subj "$2" \
      -config "$config" 2> /dev/null
  openssl x509 -req -in "$out/$1.csr" -CA "$out/ca.pem" -CAkey "$out/ca.key" -CAcreateserial \
      -out "$out/$1.pem" -days 825 -extfile "$config" -extensions "$3" 2> /dev/null
  rm -f "$out/$1.csr"
}
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$out/ca.key" -out "$out/ca.pem" -days 825 \
    -subj "/CN=fedkit deployment CA" -config "$config" -extensions ca 2> /dev/null
sign server "/CN=fedkit server" server
: > "$out/tokens.txt"
for ((k = 0; k < clients; k++)); do
  sign "client$k" "/CN=fedkit client $k" client
  token=$(openssl rand -hex 24)
  echo "$k $token" >> "$out/tokens.txt"
  echo "$token" > "$out/token$k.txt"
done
rm -f "$out/ca.srl"
chmod 644 "$out"/*.pem "$config"
echo "credentials for a server ($names) and $clients clients in $out"
