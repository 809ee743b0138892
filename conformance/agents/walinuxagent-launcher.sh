#!/bin/sh
# Runs WALinuxAgent's daemon, unmodified, with the scratch configuration of docs/protocol.md §9.1:
# everything it writes stays below the case folder.
#
#   walinuxagent-launcher.sh AGENT_ROOT CASE_DIR MODE
#
# AGENT_ROOT  the unpacked .deb (target/agents/walinuxagent-<version>)
# CASE_DIR    the case folder; the agent's files go to CASE_DIR/wala/
# MODE        ready        Provisioning.Agent=disabled: Ready only
#             provisioning Provisioning.Agent=cloud-init, with ovf-env.xml and an ssh host key:
#                          NotReady/Provisioning, then Ready
#             failure      Provisioning.Agent=cloud-init, with an ovf-env.xml without HostName:
#                          NotReady/ProvisioningFailed "[ProvisionError] ..."
#             waagent      Provisioning.Agent=waagent: its own provisioning from the guest's
#                          media (`fake-wireserver sandbox --guest`, which it must run in):
#                          reads /mnt/cdrom/secure/ovf-env.xml, sets the host name, creates the
#                          user; Ready, or NotReady/ProvisioningFailed in its own words
#
# Run it only inside `fake-wireserver sandbox` (wirecheck's sandbox attach), which owns the
# network, bind-mounts a scratch folder over /var/log (WALA's fixed log path) and stops the
# daemon once it has reported: the daemon never exits on its own. The launcher writes the
# configuration file, ovf-env.xml and the host key, then execs waagent; it never patches it.
set -eu

[ "$#" -eq 3 ] || { echo "usage: $0 AGENT_ROOT CASE_DIR ready|provisioning|failure|waagent" >&2; exit 2; }
root=$1 case_dir=$2 mode=$3
waagent="$root/usr/sbin/waagent"
[ -f "$waagent" ] || { echo "$0: $waagent not found (run scripts/install-agents.sh)" >&2; exit 127; }

case "$mode" in
    ready) provisioning_agent=disabled ;;
    provisioning|failure) provisioning_agent=cloud-init ;;
    waagent)
        provisioning_agent=waagent
        # Its provisioning writes /etc and /home and renames the host: only in a guest, whose
        # /etc, /home and host name are private.
        [ -d /run/fake-wireserver-guest ] || { echo "$0: waagent mode runs only in fake-wireserver sandbox --guest" >&2; exit 2; }
        ;;
    *) echo "$0: MODE must be ready, provisioning, failure or waagent, got '$mode'" >&2; exit 2 ;;
esac

scratch="$case_dir/wala"
lib="$scratch/lib" ssh="$scratch/ssh"
mkdir -p "$lib" "$ssh" "$scratch/extensions" "$scratch/dvd"
conf="$scratch/waagent.conf"
cat > "$conf" <<CONF
Provisioning.Agent=$provisioning_agent
Lib.Dir=$lib
Pid.File=$scratch/waagent.pid
Extension.LogDir=$scratch/extensions
OS.SshDir=$ssh
$( [ "$mode" = waagent ] || echo "DVD.MountPoint=$scratch/dvd" )
OS.OpensslPath=/usr/bin/openssl
Logs.Console=n
Logs.Verbose=y
ResourceDisk.Format=n
ResourceDisk.EnableSwap=n
Extensions.Enabled=n
AutoUpdate.Enabled=n
OS.EnableFirewall=n
OS.EnableRDMA=n
DetectScvmmEnv=n
Provisioning.MonitorHostName=n
Provisioning.RegenerateSshHostKeyPair=n
Provisioning.DeleteRootPassword=n
CONF
# The daemon stops before it spawns the extension handler (-run-exthandlers), then sleeps.
: > "$lib/disable_agent"

if [ "$mode" = waagent ]; then
    # The image it provisions has no cloud-init enabled (the host's may): its provisioning
    # refuses to run beside it (pa/provision/cloudinitdetect.py). Only the guest's /etc changes.
    rm -f /etc/systemd/system/cloud-init.target.wants/cloud-init*.service
    # An image's sshd configuration and host key, which it edits and fingerprints.
    : > "$ssh/sshd_config"
    [ -f "$ssh/ssh_host_rsa_key.pub" ] || ssh-keygen -q -t rsa -b 2048 -N '' -f "$ssh/ssh_host_rsa_key"
elif [ "$mode" != ready ]; then
    if [ "$mode" = failure ]; then hostname_element=""; else hostname_element="<ns1:HostName>wala-vm</ns1:HostName>"; fi
    cat > "$lib/ovf-env.xml" <<OVF
<?xml version="1.0" encoding="utf-8"?>
<ns0:Environment xmlns="http://schemas.dmtf.org/ovf/environment/1" xmlns:ns0="http://schemas.dmtf.org/ovf/environment/1" xmlns:ns1="http://schemas.microsoft.com/windowsazure" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <ns1:ProvisioningSection>
    <ns1:Version>1.0</ns1:Version>
    <ns1:LinuxProvisioningConfigurationSet>
      <ns1:ConfigurationSetType>LinuxProvisioningConfiguration</ns1:ConfigurationSetType>
      $hostname_element
      <ns1:UserName>azureuser</ns1:UserName>
      <ns1:DisableSshPasswordAuthentication>true</ns1:DisableSshPasswordAuthentication>
    </ns1:LinuxProvisioningConfigurationSet>
  </ns1:ProvisioningSection>
  <ns1:PlatformSettingsSection>
    <ns1:Version>1.0</ns1:Version>
    <ns1:PlatformSettings>
      <ns1:ProvisionGuestAgent>true</ns1:ProvisionGuestAgent>
    </ns1:PlatformSettings>
  </ns1:PlatformSettingsSection>
</ns0:Environment>
OVF
    # What cloud-init would have made: WALA waits for the public half.
    [ -f "$ssh/ssh_host_rsa_key.pub" ] || ssh-keygen -q -t rsa -b 2048 -N '' -f "$ssh/ssh_host_rsa_key"
fi

PYTHONPATH="$root/usr/lib/python3/dist-packages"
export PYTHONPATH
exec /usr/bin/python3 -u "$waagent" -daemon "-configuration-path:$conf"
