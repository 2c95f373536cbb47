# bash completion for sbx (sandboxd's command line)
_sbx_ids()
{
	sbx ls -q 2>/dev/null
}

_sbx()
{
	local cur prev words cword
	if declare -F _init_completion >/dev/null 2>&1; then
		_init_completion -n : || return
	else
		cur=${COMP_WORDS[COMP_CWORD]}
		prev=${COMP_WORDS[COMP_CWORD-1]}
		words=("${COMP_WORDS[@]}")
		cword=$COMP_CWORD
	fi
	local cmds="create ls info stop rm exec sh cp ps logs kill run-code snapshot fork restore backup image help"
	local i cmd="" nargs=0
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		--url | --token) ((i++)) ;;
		-*) ;;
		*)
			if [[ -z $cmd ]]; then cmd=${words[i]}; else ((nargs++)); fi
			;;
		esac
	done
	if [[ -z $cmd ]]; then
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "--url --token --help --version" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "$cmds" -- "$cur"))
		fi
		return
	fi
	local opts="--help"
	case $cmd in
	create) opts="--memory --cpus --pids --disk --sleep-after --keep-alive --from-snapshot --env --label --json --help" ;;
	snapshot) opts="--name --sandbox --json --help" ;;
	backup) opts="--dir --exclude --ttl --json --help" ;;
	image) opts="--json --help" ;;
	fork) opts="--json --help" ;;
	restore) opts="--dir --help" ;;
	ls) opts="--json -q --help" ;;
	info | ps) opts="--json --help" ;;
	exec) opts="--command --cwd --env --timeout --session --no-stdin --help" ;;
	cp) opts="--quiet --help" ;;
	logs) opts="--follow --help" ;;
	run-code) opts="--lang --timeout --help" ;;
	sh) opts="--session --shell --help" ;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$opts" -- "$cur"))
		return
	fi
	case $prev in
	--lang | -l)
		COMPREPLY=($(compgen -W "python javascript typescript" -- "$cur"))
		return
		;;
	esac
	case $cmd in
	help) COMPREPLY=($(compgen -W "$cmds" -- "$cur")) ;;
	image)
		((nargs == 0)) && COMPREPLY=($(compgen -W "import ls info rm" -- "$cur"))
		;;
	snapshot | backup)
		if ((nargs == 0)); then
			COMPREPLY=($(compgen -W "create ls info rm" -- "$cur"))
		elif [[ ${words[2]} == create ]]; then
			COMPREPLY=($(compgen -W "$(_sbx_ids)" -- "$cur"))
		fi
		;;
	fork | restore)
		((nargs == 0)) && COMPREPLY=($(compgen -W "$(_sbx_ids)" -- "$cur"))
		;;
	cp)
		if [[ $cur == *:* ]]; then
			COMPREPLY=()
		else
			COMPREPLY=($(compgen -f -- "$cur") $(compgen -S : -W "$(_sbx_ids)" -- "$cur"))
			compopt -o nospace 2>/dev/null
		fi
		;;
	run-code)
		if ((nargs == 0)); then
			COMPREPLY=($(compgen -W "$(_sbx_ids)" -- "$cur"))
		else
			COMPREPLY=($(compgen -f -- "$cur"))
		fi
		;;
	exec | sh | info | ps | logs | kill)
		((nargs == 0)) && COMPREPLY=($(compgen -W "$(_sbx_ids)" -- "$cur"))
		;;
	stop | rm) COMPREPLY=($(compgen -W "$(_sbx_ids)" -- "$cur")) ;;
	esac
}
complete -F _sbx sbx
