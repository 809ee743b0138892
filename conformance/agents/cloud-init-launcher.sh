#!/bin/sh
# Boots cloud-init's Azure datasource, unmodified, through its own entry points in the guest of
# `fake-wireserver sandbox --guest`: `cloud-init init --local` (reads the media's ovf-env.xml,
# takes a DHCP lease, queries IMDS, reports Ready or its failure to the wireserver and KVP),
# then `cloud-init init` (the host name and the users, after Ready).
#
#   cloud-init-launcher.sh AGENT_ROOT CASE_DIR
#
# AGENT_ROOT  the unpacked .deb (target/agents/cloud-init-<version>)
# CASE_DIR    the case folder; cloud-init's state goes to CASE_DIR/cloud-init/
#
# What the launcher gives it, and why (docs/real-agents.md, "cloud-init through its boot"):
# - the package's /etc/cloud in the guest's private /etc, plus 99-wirecheck.cfg: the Azure
#   datasource only (as on an Azure image), KVP telemetry on (hyperv), no network rendering,
#   udhcpc as its DHCP client, its state below the case folder, no disk grown or resized (the
#   guest's disks are the host's);
# - three tools first on PATH, each standing for what the platform and the VM already are:
#   - systemd-detect-virt: a Hyper-V VM, not a container (wirecheck may run in one, where
#     cloud-init reads no DMI: util.is_container);
#   - udhcpc: the platform's DHCP answer, given to cloud-init's own lease script: the address the
#     guest's eth0 has (10.0.0.4/24) and classless static routes to the wireserver and IMDS
#     (option 121, which cloud-init requires of the primary NIC: DataSourceAzure
#     _check_if_primary). No option 245 (Azure's DHCP sends the wireserver's address in it):
#     cloud-init then falls back to 168.63.129.16, the same address; that path is not exercised;
#   - ip: the guest's root has no network privileges in the sandbox's namespace, and the
#     network is already what the lease says, so changes (link up, address, routes) succeed
#     without effect; every other call is the real ip's.
# It never patches cloud-init, and runs only in a guest (its /etc, host name and users are
# private there).
set -eu

[ "$#" -eq 2 ] || { echo "usage: $0 AGENT_ROOT CASE_DIR" >&2; exit 2; }
root=$1 case_dir=$2
pkg="$root/usr/lib/python3/dist-packages"
[ -d "$pkg/cloudinit" ] || { echo "$0: $pkg/cloudinit not found (run scripts/install-agents.sh)" >&2; exit 127; }
[ -d /run/fake-wireserver-guest ] || { echo "$0: runs only in fake-wireserver sandbox --guest" >&2; exit 2; }

scratch="$case_dir/cloud-init"
# It goes into YAML single-quoted: a quote in it would end the value.
case "$scratch" in *"'"*) echo "$0: CASE_DIR must not hold a single quote: $case_dir" >&2; exit 2 ;; esac
shims="$scratch/bin"
mkdir -p "$shims" "$scratch/lib" "$scratch/waagent"

cat > "$shims/systemd-detect-virt" <<'SH'
#!/bin/sh
# A Hyper-V VM: virtualization "microsoft", no container.
for a in "$@"; do
    case "$a" in --container|-c) [ "$1" = --quiet ] || echo none; exit 1 ;; esac
done
[ "$1" = --quiet ] || echo microsoft
SH

cat > "$shims/udhcpc" <<'SH'
#!/bin/sh
# The platform's DHCP answer for eth0, through the lease script cloud-init passes with -s.
script= iface=
while [ "$#" -gt 0 ]; do
    case "$1" in -s) script=$2; shift ;; -i) iface=$2; shift ;; esac
    shift
done
[ -n "$script" ] && [ "$iface" = eth0 ] || { echo "udhcpc: no lease for '$iface'" >&2; exit 1; }
interface=eth0 ip=10.0.0.4 subnet=255.255.255.0 router=10.0.0.1 \
    staticroutes="168.63.129.16/32 10.0.0.1 169.254.169.254/32 10.0.0.1" \
    "$script" bound
SH

cat > "$shims/ip" <<'SH'
#!/bin/sh
# Changes to the network succeed without effect (it already is what the lease says); the rest
# is the real ip's.
args=" $* "
case "$args" in
    *" link set "*|*" addr add "*|*" addr del "*|*" address add "*|*" address del "*|*" route add "*|*" route append "*|*" route del "*|*" route replace "*)
        exit 0 ;;
esac
for real in /usr/sbin/ip /sbin/ip /usr/bin/ip /bin/ip; do
    [ -x "$real" ] && exec "$real" "$@"
done
echo "ip: not found" >&2
exit 127
SH
chmod 755 "$shims/systemd-detect-virt" "$shims/udhcpc" "$shims/ip"

# The package's configuration only: what the host's cloud-init (if any) was given is not the
# image's.
rm -rf /etc/cloud
mkdir -p /etc/cloud/cloud.cfg.d
cp "$root/etc/cloud/cloud.cfg" /etc/cloud/cloud.cfg
cp "$root/etc/cloud/cloud.cfg.d/"*.cfg /etc/cloud/cloud.cfg.d/
[ ! -d "$root/etc/cloud/templates" ] || cp -r "$root/etc/cloud/templates" /etc/cloud/
cat > /etc/cloud/cloud.cfg.d/99-wirecheck.cfg <<CFG
datasource_list: [Azure]
datasource:
  Azure:
    data_dir: '$scratch/waagent'
network:
  config: disabled
reporting:
  logging: {type: log}
  telemetry: {type: hyperv}
# The guest's disks are the host's: nothing is grown or resized.
resize_rootfs: false
growpart: {mode: "off"}
system_info:
  network:
    dhcp_client_priority: [udhcpc]
  paths:
    cloud_dir: '$scratch/lib'
CFG

PYTHONPATH="$pkg"
PATH="$shims:/usr/sbin:/usr/bin:/sbin:/bin"
export PYTHONPATH PATH
# The local stage reports; the network stage (users, host name) runs only after it.
/usr/bin/python3 -m cloudinit.cmd.main --debug init --local
exec /usr/bin/python3 -m cloudinit.cmd.main --debug init
