// Package deploy holds no Go code of its own: its folder is the scripts
// and files that install, package and build froog (deploy/package.sh,
// deploy/debian, deploy/systemd, deploy/testdeps.sh, the VM images), and
// its tests check what they make.
package deploy
